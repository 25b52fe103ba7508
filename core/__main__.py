"""``python -m core``: the command line (``core.cli``)."""
import sys

if __name__ == "__main__":
    try:
        from core.cli import main
    except KeyboardInterrupt:  # Ctrl-C while torch and transformers are still being imported
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())
