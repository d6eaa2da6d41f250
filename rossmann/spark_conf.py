"""The Spark settings of the Rossmann workflows' Spark tasks, Flyte 1's (``workflows/rossmann.py``) and Flyte 2's
(``workflows/rossmann_flyte2.py``) alike: 8 shuffle partitions for data of this size (Spark's 200 doubled the prepare
task's time), a 4 GB driver, no UI and no progress bars in a task's log."""

SPARK_CONF = {"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "4g", "spark.ui.enabled": "false",
              "spark.ui.showConsoleProgress": "false"}
