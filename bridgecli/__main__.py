"""``python -m bridgecli`` behaves exactly like the ``bridge`` console script."""

from bridgecli.cli import main

if __name__ == "__main__":
    main()
