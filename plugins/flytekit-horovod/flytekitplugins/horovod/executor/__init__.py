"""What a Horovod rank or a Spark executor runs: no module here imports flytekit at the top, so a rank and a Spark
barrier task work where flytekit is not installed (tests/plugin/test_no_flytekit.py). ``spark_launcher`` ships this
package by value to Spark executors; the task plugins and launchers one level up import from here, never the reverse
at the top (``failures`` and ``settings`` reach up lazily, on the launcher's side only)."""
