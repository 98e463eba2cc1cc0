"""The PySpark side: the fan-out job, its SparkSession and the Delta Lake Spark connector."""
