import os

# Every run in the test suite checks the emulator's invariants (capacity, exactly-once tasks,
# RM view == node reality at the end).
os.environ["HBEMU_CHECK_INVARIANTS"] = "1"
