"""``python -m trioqueue``: the same command line as ``trioqueue``."""

from trioqueue.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
