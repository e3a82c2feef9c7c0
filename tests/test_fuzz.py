"""Fuzzing as a test: every reader a stranger's file reaches (tests/fuzz_readers.py) reads
each drawn input or refuses it with the project's one-line error, within 5 s and 1 GB.
A small, fixed budget here (FAST_EXAMPLES a reader, derandomized: the same cases each
run); bench/fuzz.py runs the long one."""

import time

import pytest
from fuzz_readers import READ, READERS, REFUSED, check, in_child
from hypothesis import HealthCheck, given, settings

FAST_EXAMPLES = 20  # 2 to 5 s a reader on one core


@pytest.mark.parametrize("name", READERS)
def test_a_reader_reads_or_refuses_any_input_in_bounded_time_and_memory(name):
    reader = READERS[name]

    @settings(max_examples=FAST_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(reader.inputs())
    def reads_or_refuses(data: bytes) -> None:
        outcome = check(reader, data)
        assert outcome.kind in (READ, REFUSED), f"{name}: {outcome.kind}: {outcome.detail}"

    reads_or_refuses()


def test_the_harness_names_a_hang_a_memory_hog_and_a_crash(tmp_path):
    started = time.monotonic()
    assert in_child(lambda _: time.sleep(30), tmp_path, limit_s=0.5).kind == "hang"
    assert time.monotonic() - started < 5
    hog = in_child(lambda _: bytearray(2 * 1024**3), tmp_path)  # past the 1 GB limit
    assert hog.kind == "crash" and "MemoryError" in hog.detail
    assert in_child(lambda _: {}["x"], tmp_path).kind == "crash"
    assert in_child(lambda _: None, tmp_path).kind == READ
