"""``python -m scaleup``: the same command line as the ``scaleup`` console script."""

from scaleup.cli import main

if __name__ == "__main__":
    main()
