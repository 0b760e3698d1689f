#!/usr/bin/env python3
"""Stability of stale-synchronous SGD with Nesterov momentum on a scalar quadratic.

f(x) = h x^2 / 2, learning rate 1 (so h is curvature x learning rate). The update rule is the
parameter server's (train/param_server.hpp): round t's gradient is applied k steps later; the
workers compute on the true weights (none), on the momentum-only prediction (momentum), or on
the in-flight rounds replayed with the owner's own gradient (local-gradient; with one noiseless
gradient this is the synchronous trajectory). Prints the largest h for which the iteration
still converges, and the per-step contraction in a flat direction (h = 0.001).
Used for the analysis in docs/communication.md; pure Python, no dependencies.
"""


def contraction(h, k, mode, mu=0.9, lr=1.0, steps=600):
    x, v, shown, pending = 1.0, 0.0, 1.0, []
    norms = []
    for _ in range(steps):
        pending.append(h * shown)
        if len(pending) > k:
            g = pending.pop(0)
            v = mu * v + g
            x -= lr * (g + mu * v)
            if mode == "momentum":
                c, p = 0.0, mu
                for _ in range(k):
                    p *= mu
                    c += p
                shown = x - lr * c * v
            elif mode == "local-gradient":  # replay the in-flight rounds (noiseless: own = sum)
                xs, vs = x, v
                for gs in pending:
                    vs = mu * vs + gs
                    xs -= lr * (gs + mu * vs)
                shown = xs
            else:
                shown = x
        elif k == 0:
            shown = x
        norms.append(abs(x) + abs(v))
        if norms[-1] > 1e30:
            return float("inf")
    a, b = norms[steps // 2], norms[-1]
    return (b / a) ** (1.0 / (steps - steps // 2)) if a > 0 else 0.0


def edge(k, mode, **kw):
    lo, hi = 1e-4, 10.0
    for _ in range(50):
        m = (lo * hi) ** 0.5
        lo, hi = (m, hi) if contraction(m, k, mode, **kw) < 1 else (lo, m)
    return lo


if __name__ == "__main__":
    print(f"{'staleness':>9} {'compensation':>15} {'largest stable h*lr':>20} {'flat rate':>10}")
    print(f"{0:>9} {'(sync)':>15} {edge(0, 'none'):>20.3f} {contraction(1e-3, 0, 'none'):>10.4f}")
    for k in (1, 2):
        for mode in ("none", "momentum", "local-gradient"):
            print(f"{k:>9} {mode:>15} {edge(k, mode):>20.3f} {contraction(1e-3, k, mode):>10.4f}")
