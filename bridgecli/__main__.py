"""``python -m bridgecli`` behaves exactly like the ``bridge`` console script."""

from bridgecli.entry import main

if __name__ == "__main__":
    main()
