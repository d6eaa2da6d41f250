"""A slow Python: on a host whose PYTHONPATH starts with this folder, every Python process starts 10 s late.

What a cold disk or a busy node does to a rank's start on a real cluster; the multi-host tests put it on one
worker host only (its pod or Spark worker environment). Nothing else changes.
"""

import time

time.sleep(10)
