"""peer_time.py - the timing the peer scripts share (cuda/peer_*.py import it from beside them)."""
import torch


def median_ms(fn, reps=20, warm=3):
    """Median of reps calls of fn after warm warm-ups, each timed with CUDA events around the call (ms)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]
