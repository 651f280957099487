"""The ``tessera`` console script installed by ``pip install .``: runs the C++ CLI."""

import sys

from . import _C


def main() -> int:
    status, out, err = _C.run_cli(sys.argv[1:])
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    sys.exit(main())
