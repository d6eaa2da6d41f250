"""What a run printed, as a user reads it: its lines, and the lines it printed twice (the same message raw and again
with a rank's prefix, or twice with the same prefix)."""

import collections
import re
from typing import List

MOST_LINES = 40  # what the default wf and a 3-epoch Estimator task may print (issue 31)
# a rank's launcher prefix ("[0]<stderr>:", "[1,0]<stdout>:"), the ranks' log format ("[rank 0/2] 10:19:54 WARNING
# tensorflow: "), Python's default one ("WARNING:tensorflow:")
_PREFIXES = re.compile(r"^(\[\d+(,\d+)?\]<std(out|err)>:)?(\[rank \d+/\d+\] [\d:]+ [A-Z]+ [\w.]+: |[A-Z]+:[\w.]+:)?")


def printed_lines(output: str) -> List[str]:
    return [line for line in output.strip().splitlines() if line.strip()]


def printed_twice(output: str) -> List[str]:
    """The messages that more than one line of ``output`` carries, prefixes aside."""
    counts = collections.Counter(_PREFIXES.sub("", line).strip() for line in printed_lines(output))
    return [message for message, count in counts.items() if count > 1]
