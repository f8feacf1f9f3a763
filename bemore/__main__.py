"""Allow ``python -m bemore``."""

from bemore.cli import main

if __name__ == "__main__":
    main()
