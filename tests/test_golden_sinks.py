"""Golden outputs: the sample and the format samples through every sink, byte for byte.

Recorded from the code before the speed work (tests/golden_outputs.py): an
optimization must not change one output byte (normalized file, drops, dead letters; Parquet
rows read back).
"""

import pytest
from golden_outputs import case_name, cases, digest, golden, render

GOLDEN = golden()


def test_every_case_is_recorded():
    assert sorted(GOLDEN) == sorted(case_name(*case) for case in cases())


@pytest.mark.parametrize("path,sink,file_format", cases(), ids=lambda v: getattr(v, "name", v))
def test_output_is_byte_identical_to_the_golden_one(path, sink, file_format):
    assert digest(render(path, sink, file_format)) == GOLDEN[case_name(path, sink, file_format)]
