"""Allow ``python -m bemore``."""

from bemore.console import main

if __name__ == "__main__":
    main()
