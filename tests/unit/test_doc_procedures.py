"""The operations guide's executable procedures: each block is found, is valid bash, and the sed
command the guide gives operators extracts exactly what the system tests run
(tests/system/test_operations_procedures.py runs them against real brokers)."""

import subprocess

import pytest

from tests.harness.doc_procedures import GUIDE, procedure

PROCEDURES = ["rolling-restart", "add-broker"]


@pytest.mark.parametrize("name", PROCEDURES)
def test_the_block_is_valid_bash_and_fails_on_errors(name):
    body = procedure(name)
    assert body.startswith("set -eu\n"), "a failed step must stop the procedure"
    done = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", PROCEDURES)
def test_the_guides_sed_command_extracts_what_the_tests_run(name):
    # The command as the guide prints it for rolling-restart, with the name of this block.
    command = GUIDE.read_text().split("$ sed -n '", 1)[1].split("' docs/operations.md", 1)[0]
    command = command.replace("procedure=rolling-restart", f"procedure={name}")
    done = subprocess.run(["sed", "-n", command, str(GUIDE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == procedure(name)
