"""Extract every corpus entry's repository at its pinned commit from the fetch tool's
mirrors (``MIRROR_ROOT/OWNER+NAME/repo``, bare git dirs) into ``EXT/src/<id>/``, turn a
notebook into a script where the entry says so, and write its synthetic data.

    python benchmarks/profile_real/setup_corpus.py /work/.mirror /work/ext/profile_real

Nothing here is committed: the manifest names what to take, this script takes it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_data import MAKERS  # noqa: E402

MANIFEST = HERE / "manifest.json"


def load_manifest() -> dict[str, Any]:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def bare_dir(mirror_root: Path, repo: str) -> Path:
    base = mirror_root / repo.replace("/", "+") / "repo"
    return base / ".git" if (base / ".git").is_dir() else base


def extract(mirror_root: Path, repo: str, commit: str, dest: Path) -> None:
    git = bare_dir(mirror_root, repo)
    if not git.exists():
        raise SystemExit(f"{repo}: no mirror at {git}; fetch it first (fetch tool: github:{repo})")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    # Snapshots leave out files of 4 MiB and more (datasets): archive without them.
    missing = _missing_blobs(git, commit)
    cmd = ["git", "-C", str(git), "archive", commit]
    if missing:
        cmd += ["--", ".", *(f":(exclude){path}" for path in missing)]
    archive = subprocess.run(cmd, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def _missing_blobs(git: Path, commit: str) -> list[str]:
    listing = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", commit], check=True,
                             capture_output=True, text=True).stdout.splitlines()
    entries = [(line.split()[2], line.split("\t", 1)[1]) for line in listing if " blob " in line]
    check = subprocess.run(["git", "-C", str(git), "cat-file", "--batch-check"],
                           input="\n".join(sha for sha, _ in entries) + "\n", capture_output=True,
                           text=True).stdout.splitlines()
    return [path for (_sha, path), answer in zip(entries, check, strict=False) if answer.endswith("missing")]


def notebook_to_script(nb_path: Path, cells: list[int], out: Path) -> None:
    """The notebook's chosen code cells, in order, IPython magics (``%%time``) dropped."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    parts = []
    for i in cells:
        cell = nb["cells"][i]
        if cell.get("cell_type") != "code":
            raise SystemExit(f"{nb_path}: cell {i} is not code")
        src = "".join(cell["source"])
        parts.append("\n".join(line for line in src.splitlines() if not line.lstrip().startswith("%")))
    out.write_text(f"# Code cells {cells} of {nb_path.name}, magics removed.\n\n" + "\n\n".join(parts) + "\n",
                   encoding="utf-8")


def tree_of(ext: Path, entry: dict[str, Any]) -> Path:
    return ext / "src" / entry["id"]


def setup_entry(mirror_root: Path, ext: Path, entry: dict[str, Any]) -> Path:
    root = tree_of(ext, entry)
    extract(mirror_root, entry["repo"], entry["commit"], root)
    for extra in entry.get("extra_repos", []):
        extract(mirror_root, extra["repo"], extra["commit"], ext / "src" / extra["repo"].replace("/", "+"))
    if entry.get("notebook"):
        notebook_to_script(root / entry["notebook"], entry["cells"], root / entry["script"])
    if entry.get("data"):
        MAKERS[entry["data"]](root)
    return root


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mirror_root", type=Path)
    p.add_argument("ext", type=Path, nargs="?", default=Path("/work/ext/profile_real"))
    p.add_argument("--only", action="append")
    a = p.parse_args()
    for entry in load_manifest()["entries"]:
        if a.only and entry["id"] not in a.only:
            continue
        root = setup_entry(a.mirror_root, a.ext, entry)
        print(f"{entry['id']}: {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
