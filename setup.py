# The metadata lives in pyproject.toml; this file lets older pip versions install the project in editable mode.
from setuptools import find_packages, setup


setup(package_dir={"": "src"}, packages=find_packages("src"))
