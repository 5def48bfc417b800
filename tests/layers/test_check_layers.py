#!/usr/bin/env python3
"""The layer checker catches each kind of violation it promises to, and passes a clean tree."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = sys.argv.pop(1) if len(sys.argv) > 1 else "scripts/check_layers.py"


def run_on(files):
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as out:
                out.write(text)
        done = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
        return done.returncode, done.stdout


class CheckLayers(unittest.TestCase):
    def test_clean_tree_passes(self):
        code, out = run_on({
            "src/core/clock.c": '#include "core/clock.h"\n#include "store/store.h"\n',
            "src/rules/rule.c": '#include "core/log.h"\n#include "backend/backend.h"\n'
                                '/* sim_engine() is named in a comment only */\n'
                                'const char *s = "cuda_trace";\n',
            "src/session/session.c": '#include "backend/sim/sim.h"\n#include "rules/rule.h"\n',
            "src/backend/cuda/cuda_pm.c": '#include "backend/cuda/cuda_loader.h"\n'
                                          '#include "pm/pm_engine.h"\n#include "pm/pm_session.h"\n',
        })
        self.assertEqual(code, 0, out)

    def test_core_including_a_feature_fails(self):
        code, out = run_on({"src/core/session.c": '#include "rules/rules_session.h"\n'})
        self.assertEqual(code, 1)
        self.assertIn("src/core/session.c: layer core must not include rules/rules_session.h", out)

    def test_core_including_a_backend_fails(self):
        code, out = run_on({"src/core/collector.c": '#include "backend/sim/sim.h"\n'})
        self.assertEqual(code, 1)
        self.assertIn("must not include backend/sim/sim.h", out)

    def test_store_including_a_feature_fails(self):
        code, out = run_on({"src/store/store_replay.h": '#include "replay/replay.h"\n'})
        self.assertEqual(code, 1)
        self.assertIn("layer store must not include replay/replay.h", out)

    def test_feature_naming_a_backend_fails(self):
        code, out = run_on({"src/deepwin/w.c": 'void f(void) { use(sim_engine()); }\n'})
        self.assertEqual(code, 1)
        self.assertIn("feature deepwin names backend symbol sim_engine", out)

    def test_feature_including_a_backend_fails(self):
        code, out = run_on({"src/replay/r.c": '#include "backend/cuda/cuda_replay.h"\n'})
        self.assertEqual(code, 1)
        self.assertIn("layer replay must not include backend/cuda/cuda_replay.h", out)

    def test_backend_reaching_up_fails(self):
        code, out = run_on({
            "src/backend/cuda/cuda_pm.c": '#include "deepwin/deepwin_session.h"\n',
            "src/backend/sim/sim.c": '#include "session/session.h"\n#include "backend/cuda/cuda_pm.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertIn("layer backend:cuda must not include deepwin/deepwin_session.h", out)
        self.assertIn("layer backend:sim must not include session/session.h", out)
        self.assertIn("layer backend:sim must not include backend/cuda/cuda_pm.h", out)


if __name__ == "__main__":
    unittest.main()
