"""The example agent loop runs: one charge, every retry stopped, the callback replayed."""

from __future__ import annotations

import contextlib
import io
import pathlib
import sys
import unittest

from .support import ADMIN_DSN, WRITER_DSN, rows, unique

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "examples"))
import agent_loop  # noqa: E402


class ExampleTest(unittest.TestCase):
    def test_the_agent_loop_example_charges_once_through_every_retry(self):
        order = unique("coffee")
        with contextlib.redirect_stdout(io.StringIO()):
            outcome = agent_loop.main(WRITER_DSN, ADMIN_DSN, order_id=order)
        self.assertEqual(outcome["charges"], 1)
        self.assertIsNotNone(outcome["replayed"])
        results = [c for role, c in outcome["transcript"] if role == "tool_result"]
        self.assertEqual(len(results), 2)  # the first call, then the model's own retry
        self.assertTrue(all("Do not retry" in r for r in results), results)
        sources = rows(
            "SELECT trigger_source, outcome FROM idem.attempts WHERE biz_id = %s ORDER BY id", order
        )
        self.assertEqual(
            sources,
            [
                ("initial", "executed"),  # the response is lost: UNKNOWN
                ("framework", "in_progress"),  # the framework's retry policy
                ("llm", "in_progress"),  # the model asks again
                ("framework", "in_progress"),
                ("callback", "replayed"),  # the webhook's re-drive, after reconciliation
            ],
        )


if __name__ == "__main__":
    unittest.main()
