"""``python -m pitstop`` runs the command-line tool."""

from pitstop.cli import main

if __name__ == "__main__":
    main()
