"""Turns the native stack TESSERA_CRASH_TRACE=1 prints into function names
and source lines (addr2line and c++filt): python3 scripts/symbolize.py < log."""

import re
import subprocess
import sys

for line in sys.stdin:
    m = re.match(r"(\S+)\((\S*)\+0x([0-9a-f]+)\)", line.strip())
    if not m:
        print(line, end="")
        continue
    lib, sym, off = m.groups()
    if sym:
        name = subprocess.run(["c++filt", sym], capture_output=True, text=True).stdout.strip()
        print(f"  {name} +0x{off}  ({lib})")
        continue
    out = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", lib, "0x" + off], capture_output=True, text=True).stdout
    print("  " + " | ".join(out.split("\n")).strip(" |") + f"  ({lib})")
