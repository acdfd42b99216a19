# Stub so that `--setup_file ./setup.py` can stage this project on Dataflow workers;
# all metadata lives in pyproject.toml.
import setuptools

setuptools.setup()
