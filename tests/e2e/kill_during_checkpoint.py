"""kill_during_checkpoint.py CKPT_DIR MIN_STEP -- CMD...

Runs CMD and kills it with SIGKILL the moment a checkpoint directory is being
written (CKPT_DIR/.tmp-step-N with N >= MIN_STEP exists), so that the process dies
in the middle of a checkpoint. Prints "killed during .tmp-step-N" and exits 0, or
exits 1 if CMD ended (or 120 s passed) before that happened."""
import os, signal, subprocess, sys, time

ckpt, min_step = sys.argv[1], int(sys.argv[2])
cmd = sys.argv[sys.argv.index("--") + 1:]
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.environ.get("KILL_LOG", os.devnull), "w"))
deadline = time.monotonic() + 120
while proc.poll() is None and time.monotonic() < deadline:
    try:
        names = os.listdir(ckpt)
    except FileNotFoundError:
        names = []
    tmp = [n for n in names if n.startswith(".tmp-step-") and int(n[len(".tmp-step-"):]) >= min_step]
    if tmp:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        print("killed during " + tmp[0])
        sys.exit(0)
    time.sleep(0.0002)
if proc.poll() is None:
    proc.kill()
proc.wait()
print("the run ended (status %s) before a checkpoint was being written" % proc.returncode)
sys.exit(1)
