"""Packaging for sharedsub: JMS 2.0 topic subscriptions over AMQP 1.0 on Delta Lake."""

from setuptools import find_packages, setup

# Pinned: these are the versions the suite runs against (see README "The two commands").
RUNTIME = [
    "pyspark==4.2.0",
    "deltalake==1.6.6",
    "delta-spark==4.4.1",
    "python-qpid-proton==0.40.0",
    "pyarrow==26.0.1",
    # The object-store client (Rust object_store, as delta-rs uses) for data dirs on S3:
    # sharedsub.storage.objects.s3_store.
    "obstore==0.12.1",
    # For the notebooks (data teams read backlogs as DataFrames) and PySpark's pandas-based APIs;
    # 2.x because PySpark 4.2 warns that it does not fully support pandas 3.
    "pandas==2.3.3",
]
DEV = [
    "pytest==9.2.0",
    "pytest-timeout==2.4.0",
    "hypothesis==6.155.2",
    "pika==1.4.4",  # bench/: declares RabbitMQ's durable queues over AMQP 0-9-1
    # notebooks/ run headless in the suite (tests/ops/test_backlog_notebook.py)
    "nbclient==0.11.0",
    "nbformat==5.11.1",
    "ipykernel==7.4.0",
    "matplotlib==3.11.2",
    # static checks in the suite (tests/unit/test_static_checks.py; settings in pyproject.toml)
    "ruff==0.17.6",
    "mypy==2.4.1",
    # the browser tier (tests/browser): drives Debian's chromium (bootstrap.py installs it), never
    # a browser Playwright downloads itself
    "playwright==1.64.1",
]

setup(
    name="sharedsub",
    version="0.1.0",
    description="JMS 2.0 shared/durable topic subscriptions over AMQP 1.0, stored in Delta Lake, routed by Spark",
    python_requires=">=3.11",
    packages=find_packages(include=["sharedsub", "sharedsub.*", "connectors", "connectors.*", "jobs", "jobs.*"]),
    # The defaults of every setting and of the Spark job ship with the package (one source each).
    package_data={
        "sharedsub": ["py.typed"],
        "sharedsub.core": ["defaults.toml"],
        "jobs": ["spark-defaults.conf"],
        # the web console's page, script and style sheet (connectors/http/console.py serves them)
        "connectors.http": ["console_assets/*"],
    },
    install_requires=RUNTIME,
    extras_require={"dev": DEV},
    entry_points={"console_scripts": ["sharedsub = sharedsub.cli:main"]},
)
