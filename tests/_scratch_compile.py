import sys, torch
sys.path.insert(0, "tests")
from benchmarks.gpu_compile import compile_in_subprocess
from reduce_helpers import dedupe, gpu_reduce_launches
cases = [("rows", "ARGMAX", torch.float32), ("split", "LOG_SUM_EXP", torch.bfloat16), ("rows","MULTIPLY",torch.float32)]
d = dedupe(gpu_reduce_launches(cases))
for r in compile_in_subprocess(d, archs=(90,)):
    print(r["kernel"], r["ok"], r.get("error","")[:3000] if not r["ok"] else "", r.get("registers"), r.get("local_bytes"), r.get("max_load_bits"))
