"""The ``tessera`` and ``tessera-opt`` console scripts installed by ``pip install .``:
they run the C++ command line and the IR optimizer driver."""

import sys

from . import _C


def main() -> int:
    status, out, err = _C.run_cli(sys.argv[1:])
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


def opt_main() -> int:
    status, out, err = _C.run_opt(sys.argv[1:])
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    sys.exit(main())
