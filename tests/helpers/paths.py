"""Where the project and the tests' data files are, wherever a test module sits."""

from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]  # tests/helpers/paths.py -> the project
TEST_DATA = PROJECT / "tests" / "data"
