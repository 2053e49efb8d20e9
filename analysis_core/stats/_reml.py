"""REML for linear mixed models with independent random intercepts, as lme4's ``lmer`` fits them
and lmerTest tests them: the machinery shared by :mod:`.class_mixed_model` and
:mod:`.run_mixed_model`.

A model here is ``y = X beta + Z u + e`` with ``u`` made of independent normal intercepts of a few
groupings ("components"), ``Var(u_k) = gamma_k s2`` and ``Var(e) = s2``. Each subclass of
:class:`REML` folds the data into small cross-products once and implements :meth:`REML.parts` (the
GLS residual and log-determinants at a ``gamma``); everything else — the REML criterion (lme4's
``REMLcrit``), its maximisation over ``gamma >= 0``, ``Cov(beta)`` (lme4's ``vcov``) and the
ingredients of Satterthwaite's degrees of freedom for any contrast ``L' beta`` (lmerTest's
``contest1D``: ``df = 2 (L'CL)^2 / (g' A g)``, g the gradient of ``L'CL`` in the variance
parameters ``(theta, sigma)``, ``A = 2 H^+`` their covariance from the Hessian H of the REML
deviance, a Moore-Penrose inverse over eigenvalues above 1e-8 as lmerTest) — is here.

Where lmerTest takes numerical derivatives of lme4's deviance (numDeriv, Richardson extrapolation),
the gradients here are exact (complex-step differentiation of a deviance that is analytic in the
parameters) and the Hessian is the Richardson-extrapolated central difference of the exact gradient.

References: D. Bates, M. Mächler, B. Bolker and S. Walker, "Fitting Linear Mixed-Effects Models
Using lme4", Journal of Statistical Software 67(1), 2015, doi:10.18637/jss.v067.i01; A.
Kuznetsova, P. B. Brockhoff and R. H. B. Christensen, "lmerTest Package: Tests in Linear Mixed
Effects Models", Journal of Statistical Software 82(13), 2017, doi:10.18637/jss.v082.i13; J. R. R.
A. Martins, P. Sturdza and J. J. Alonso, "The Complex-Step Derivative Approximation", ACM
Transactions on Mathematical Software 29(3), 2003, doi:10.1145/838250.838251."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

import numpy as np

#: eigenvalues of the deviance's Hessian at or below this are taken as zero (lmerTest's ``tol``)
HESSIAN_TOL = 1e-8
#: a residual sum of squares below this fraction of the total is taken as exactly zero: the
#: cross-product arithmetic leaves ~1e-16 of it on exact fits
ZERO_RESIDUAL = 1e-10
GAMMA_MAX = 1e12  # variance ratios beyond this: the search has run off (reported as not converged)
#: the note of a coefficient or contrast whose Satterthwaite df is undefined
NO_DF = ("undefined: no Satterthwaite degrees of freedom (the variance of this estimate does not depend on "
         "estimated variance parameters).")
_ROWS = 1 << 16  # rows per block when folding cross-products (bounds the memory of the outer products)
_CELLS = 1 << 22  # doubles per block of outer products in :func:`crossproducts` (32 MiB)
_STEP = 1e-20  # the complex step (exact derivatives: no subtraction, so any tiny step will do)


def binsum(index: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray:
    """Per-index sums of ``rows`` (n x d): ``out[i] = sum of rows[index == i]``."""
    return np.asarray(indicators(index, size).T @ rows)


def indicators(codes: np.ndarray, size: int | None = None):
    """The n x size sparse 0/1 matrix of a grouping's codes (``Z`` of its random intercept)."""
    from scipy.sparse import csr_matrix

    size = int(codes.max()) + 1 if size is None else size
    return csr_matrix((np.ones(codes.size), (np.arange(codes.size), codes)), shape=(codes.size, size))


def outer_rows(rows: np.ndarray) -> np.ndarray:
    """Each row's outer product with itself, flattened: n x d^2."""
    return (rows[:, :, None] * rows[:, None, :]).reshape(rows.shape[0], -1)


def crossproducts(index: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray:
    """Per-index cross-products ``out[i] = rows[index == i]' rows[index == i]`` (size x d x d),
    folded a block of rows at a time (the outer products of all rows at once would take n d^2)."""
    d = rows.shape[1]
    step = max(1, min(_ROWS, _CELLS // (d * d)))
    out = np.zeros((size, d * d))
    for start in range(0, index.size, step):
        out += binsum(index[start:start + step], outer_rows(rows[start:start + step]), size)
    return out.reshape(size, d, d)


class QueryFold:
    """A query intercept integrated out of cross-products. For columns ``a = [ind, y]`` (``ind``
    dense or sparse: fixed-effect and random-effect indicators) and ``W = I + g Z_q Z_q'`` (Z_q the
    query indicators, g the query variance over the residual's), each query's block of W is ``I +
    g 11'``, inverted in closed form (Sherman-Morrison), so per block of rows (the classes, or one
    block) ``a' W^-1 a = Kw + sum_k B_k / (1 + k g)`` and ``log|W| = sum_q log(1 + n_q g)``: Kw is
    the cross-product of the within-query deviations, ``B_k = sum_{q: n_q = k} s_q s_q' / k`` with
    ``s_q`` the query's column sums. Folded once; an evaluation then costs O(blocks x d^2 x sizes),
    whatever the number of queries. Queries must not straddle blocks."""

    def __init__(self, ind, y: np.ndarray, query: np.ndarray, block: np.ndarray, n_blocks: int) -> None:
        from scipy.sparse import issparse

        n_q = np.bincount(query).astype(np.float64)
        s_ind = indicators(query, n_q.size).T @ ind
        s_ind = s_ind.toarray() if issparse(s_ind) else np.asarray(s_ind)
        s_y = binsum(query, y[:, None], n_q.size)[:, 0]
        yw = y - (s_y / n_q)[query]  # y's deviations from its query means, exactly (no cancellation)
        q_block = np.zeros(n_q.size, np.int64)
        q_block[query] = block
        d = s_ind.shape[1] + 1
        kw = np.empty((n_blocks, d, d))
        if issparse(ind) and n_blocks == 1:
            kw[0, :-1, :-1] = (ind.T @ ind).toarray()
            kw[0, :-1, -1] = ind.T @ yw
        else:
            dense = ind.toarray() if issparse(ind) else np.asarray(ind, np.float64)
            kw[:, :-1, :-1] = crossproducts(block, dense, n_blocks)
            kw[:, :-1, -1] = binsum(block, dense * yw[:, None], n_blocks)
        kw[:, :-1, :-1] -= crossproducts(q_block, s_ind / np.sqrt(n_q)[:, None], n_blocks)
        kw[:, -1, :-1] = kw[:, :-1, -1]
        kw[:, -1, -1] = np.bincount(block, yw**2, n_blocks)
        self.kw = kw
        sizes, which = np.unique(n_q, return_inverse=True)
        self.sizes, self.n_sizes = sizes, np.bincount(which).astype(np.float64)
        s = np.column_stack([s_ind, s_y]) / np.sqrt(n_q)[:, None]
        b = crossproducts(q_block * sizes.size + which, s, n_blocks * sizes.size)
        # sizes x (blocks x d^2), so that the query-size weights are one matrix product
        self.b = b.reshape(n_blocks, sizes.size, d * d).transpose(1, 0, 2).reshape(sizes.size, -1).copy()

    def k(self, g: float | complex) -> np.ndarray:
        """``a' W^-1 a`` per block (blocks x d x d) at the query variance ratio g."""
        w = 1.0 / (1.0 + self.sizes * g)
        # real and imaginary parts apart: numpy would copy the real matrix to complex first
        between = w.real @ self.b + 1j * (w.imag @ self.b) if np.iscomplexobj(w) else w @ self.b
        return self.kw + between.reshape(self.kw.shape)

    def logdet(self, g: float | complex) -> float | complex:
        """``log|W|``."""
        return self.n_sizes @ np.log1p(self.sizes * g)


def logdet(a: np.ndarray) -> np.ndarray:
    """log det of (a stack of) matrices, analytic in complex arguments: ``log(sign) + log|det|`` is
    the principal ``log(det)`` (its imaginary part, the argument, carries the complex step)."""
    sign, logabs = np.linalg.slogdet(a)
    return np.log(sign) + logabs if np.iscomplexobj(sign) else logabs


def woodbury(k: np.ndarray, nz: int, psi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Random effects integrated out of cross-products. ``k``: (a stack of) ``A' W^-1 A`` for
    columns ``A = [Z, rest]`` whose first ``nz`` are the random effects' indicators, ``psi`` their
    relative covariance (nz x nz, or its diagonal). Returns ``A' (W + Z psi Z')^-1 A`` (Woodbury: ``k - k_aZ (I +
    psi k_ZZ)^-1 psi k_Za``) and ``log|I + psi k_ZZ|`` (Sylvester: the log-determinant of ``W +
    Z psi Z'`` less that of W), per stack entry."""
    # contiguous copies: numpy's matmul of strided complex views bypasses BLAS (measured 2000x slower)
    kz = np.ascontiguousarray(k[..., :nz, :])
    psi_kz = psi[:, None] * kz if psi.ndim == 1 else psi @ kz
    a = np.eye(nz) + psi_kz[..., :nz]
    return k - np.swapaxes(kz, -1, -2) @ np.linalg.solve(a, psi_kz), logdet(a)


def identifiable(groupings: list[np.ndarray], fixed: np.ndarray) -> np.ndarray:
    """Which random intercepts a design can tell apart, for REML: each term's covariance pattern
    ``P Z Z' P`` (Z its grouping's indicators, P the projection off the fixed effects' span — the
    indicators of ``fixed``'s codes —, as REML sees only residual contrasts) must be linearly
    independent of the residual's (P) and of the terms' kept before it, in the order given. The
    trace inner products ``tr(P Z_a Z_a' P Z_b Z_b') = |Z_a' P Z_b|_F^2`` come from the sparse count
    tables ``Z_a' Z_b`` and ``Z_a' X``, so no n x n matrix is formed."""
    from scipy.sparse import identity

    n = fixed.size
    x = indicators(fixed)
    g = np.diag(1.0 / np.asarray(x.sum(axis=0)).ravel())  # (X'X)^-1
    zs = [identity(n, format="csr")] + [indicators(c) for c in groupings]
    us = [np.asarray((z.T @ x).todense()) for z in zs]
    k = len(zs)
    gram, raw = np.empty((k, k)), np.empty(k)
    for a in range(k):
        for b in range(a, k):
            nab = (zs[a].T @ zs[b]).tocsr()
            t1 = float(nab.multiply(nab).sum())
            t2 = float(np.trace(g @ (us[b].T @ np.asarray(nab.T @ us[a]))))
            t3 = float(np.trace(g @ us[a].T @ us[a] @ g @ us[b].T @ us[b]))
            gram[a, b] = gram[b, a] = t1 - 2 * t2 + t3
            if a == b:
                raw[a] = t1
    keep = [0]
    active = np.zeros(k - 1, bool)
    for j in range(1, k):
        if gram[j, j] <= 1e-9 * raw[j]:  # the pattern lies in the fixed effects' span
            continue
        sub = gram[np.ix_(keep + [j], keep + [j])]
        scale = np.sqrt(np.diag(sub))
        if np.linalg.eigvalsh(sub / np.outer(scale, scale)).min() > 1e-9:
            keep.append(j)
            active[j - 1] = True
    return active


def absorbed(y: np.ndarray, fixed: np.ndarray, groupings: list[np.ndarray]) -> bool:
    """Whether y lies in the span of the fixed effects (indicators of ``fixed``'s codes) and the
    given random intercepts' indicators — then REML sends the residual variance to 0 and every
    test to infinity. The grouping with the most levels is absorbed (within-group deviations, in
    closed form), the others regressed out by their normal equations (small: their levels)."""
    from scipy.sparse import hstack

    finest = max(groupings, key=lambda c: int(c.max()), default=np.zeros(y.size, np.int64))
    sizes = np.bincount(finest).astype(np.float64)
    yw = y - y.mean()
    yw = yw - (binsum(finest, yw[:, None], sizes.size)[:, 0] / np.maximum(sizes, 1))[finest]
    total = float(yw @ yw)
    if total == 0.0:
        return True
    b = hstack([indicators(fixed)] + [indicators(c) for c in groupings if c is not finest]).tocsr()
    s = np.asarray((indicators(finest, sizes.size).T @ b).todense())
    gram = np.asarray((b.T @ b).todense()) - (s / np.maximum(sizes, 1)[:, None]).T @ s
    rhs = np.asarray(b.T @ yw).ravel()  # B'(I - M) y = B' y_w: y_w is centred within groups
    rss = total - rhs @ np.linalg.pinv(gram, rcond=1e-10, hermitian=True) @ rhs
    return bool(rss <= ZERO_RESIDUAL * total)


def satterthwaite_df(contrasts: np.ndarray, cov: np.ndarray, jac: np.ndarray, avar: np.ndarray) -> np.ndarray:
    """lmerTest's ``contest1D`` for each row L of ``contrasts`` (r x p): ``df = 2 (L'CL)^2 / (g'
    A g)`` with C = Cov(beta), ``jac`` = dC / d varpar (p x p x k) and ``avar`` = A, the covariance
    of the variance parameters. NaN where it is undefined (L'CL not depending on them)."""
    var = np.einsum("ri,ij,rj->r", contrasts, cov, contrasts)
    g = np.einsum("ri,ijk,rj->rk", contrasts, jac, contrasts)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = 2 * var**2 / np.einsum("rk,kl,rl->r", g, avar, g)
    return np.where(np.isfinite(df) & (df > 0), df, np.nan)


def t_tests(estimate: np.ndarray, se: np.ndarray, df: np.ndarray, alpha: float) -> dict[str, np.ndarray]:
    """t statistics, two-sided p-values and ``1 - alpha`` t intervals on ``df`` degrees of freedom
    (NaN where df is undefined)."""
    from scipy import stats

    with np.errstate(invalid="ignore", divide="ignore"):
        t = estimate / se
        half = stats.t.ppf(1 - alpha / 2, df) * se
        p = 2 * stats.t.sf(np.abs(t), df)
    return {"t": t, "df": df, "p_value": p, "ci_low": estimate - half, "ci_high": estimate + half}


@dataclass(frozen=True, eq=False)
class Fitted:
    """A REML fit with what Satterthwaite's df for any contrast needs: ``gamma`` (variance
    ratios, inactive components 0), ``coef``, ``cov`` = Cov(beta), ``s2`` the residual variance,
    ``jac`` = dCov(beta)/d(theta, sigma), ``avar`` the covariance of (theta, sigma)."""

    gamma: np.ndarray
    coef: np.ndarray
    cov: np.ndarray
    s2: float
    jac: np.ndarray
    avar: np.ndarray
    converged: bool
    warnings: list[str] = field(default_factory=list)

    def df(self, contrasts: np.ndarray) -> np.ndarray:
        return satterthwaite_df(contrasts, self.cov, self.jac, self.avar)


class REML:
    """REML in lme4's relative form: ``V / s2 = W + Z Psi(gamma) Z'`` for the components'
    variance ratios ``gamma``. X spans the indicators E of ``p`` cells (the methods or families),
    so the GLS fit is done in E's coordinates (the cell means ``mu``) and mapped to treatment
    coding by ``beta = D mu`` (the first cell's mean, then each cell's difference from it); ``|X'
    V^-1 X| = |E' V^-1 E|`` as D has determinant 1. ``y`` enters shifted by its mean (fewer digits
    cancel). A subclass sets ``n``, ``p``, ``shift`` and ``n_components`` and implements
    :meth:`parts`; every function of gamma is rational, evaluated with complex arithmetic as it
    stands, so ``Im f(x + ih) / h`` is f's exact derivative (complex step)."""

    n: int
    p: int
    shift: float
    n_components: int
    _active: np.ndarray

    def parts(self, gamma: np.ndarray) -> tuple:
        """(rss, log|V/s2| + log|X'V^-1X s2|, E'V^-1E s2, the cell means of the shifted y) at
        ``gamma`` (real or complex): rss is the GLS residual ``r' (V/s2)^-1 r``."""
        raise NotImplementedError

    @property
    def d(self) -> np.ndarray:
        d = np.eye(self.p)
        d[1:, 0] = -1.0
        return d

    def gls(self, tot: np.ndarray, logdet_v: np.ndarray | complex | float) -> tuple:
        """:meth:`parts` from ``tot`` = ``[E, y]' (V/s2)^-1 [E, y]`` and ``log|V/s2|``."""
        m = self.p
        e, ey = tot[:m, :m], tot[:m, m]
        mu = np.linalg.solve(e, ey)
        return tot[m, m] - ey @ mu, logdet_v + logdet(e), e, mu

    def criterion(self, gamma: np.ndarray) -> float | complex:
        """-2 x the REML log-likelihood with s2 profiled out (lme4's ``REMLcrit``):
        ``(n - p) (1 + log(2 pi rss / (n - p))) + log|V/s2| + log|X'V^-1X s2|``."""
        rss, logdet_, _, _ = self.parts(gamma)
        dof = self.n - self.p
        return dof * (1 + np.log(2 * math.pi * rss / dof)) + logdet_

    def deviance(self, varpar: np.ndarray) -> float | complex:
        """lmerTest's ``devfun_vp``: the REML deviance at ``(theta..., sigma)`` (theta = relative
        standard deviations of the active terms, sigma the residual's), not profiled."""
        gamma, sigma2 = self._gamma(varpar), varpar[-1] ** 2
        rss, logdet_, _, _ = self.parts(gamma)
        return logdet_ + rss / sigma2 + (self.n - self.p) * np.log(2 * math.pi * sigma2)

    def covbeta(self, varpar: np.ndarray) -> np.ndarray:
        """lmerTest's ``get_covbeta``: ``sigma^2 (X' (V/s2)^-1 X)^-1`` at ``(theta..., sigma)``."""
        _, _, e, _ = self.parts(self._gamma(varpar))
        return varpar[-1] ** 2 * (self.d @ np.linalg.inv(e) @ self.d.T)

    def _gamma(self, varpar: np.ndarray) -> np.ndarray:
        gamma = np.zeros(self.n_components, dtype=np.result_type(varpar, np.float64))
        gamma[self._active] = varpar[:-1] ** 2
        return gamma

    @staticmethod
    def jacobian(f, x: np.ndarray) -> np.ndarray:
        """d f / d x_j for real-analytic f (scalar or array-valued), stacked on the last axis
        (complex step: exact)."""
        cols = []
        for j in range(x.size):
            z = x.astype(np.complex128)
            z[j] += 1j * _STEP
            cols.append(np.imag(f(z)) / _STEP)
        return np.stack(cols, axis=-1)

    def hessian(self, f, x: np.ndarray, levels: int = 4) -> np.ndarray:
        """Central differences of the exact gradient, Richardson-extrapolated over steps h, h/2,
        h/4, h/8 (h = 0.1 |x_j|, 1e-4 at 0: numDeriv's defaults): error O(h^8) plus rounding."""
        k = x.size
        out = np.empty((k, k))
        for j in range(k):
            h = 0.1 * abs(x[j]) if abs(x[j]) > 1e-4 else 1e-4
            table = []
            for level in range(levels):
                step = np.zeros(k)
                step[j] = h / 2**level
                table.append((self.jacobian(f, x + step) - self.jacobian(f, x - step)) / (2 * step[j]))
            for order in range(1, levels):
                table = [(4**order * table[i + 1] - table[i]) / (4**order - 1) for i in range(len(table) - 1)]
            out[:, j] = table[0]
        return (out + out.T) / 2

    def maximise(self, active: np.ndarray) -> tuple[np.ndarray, bool]:
        """(gamma maximising the REML likelihood over gamma >= 0, inactive terms fixed at 0;
        whether the search converged). The criterion on a coarse grid picks the start, L-BFGS-B
        with the exact gradient finds the basin, Newton steps on the free coordinates (Hessian
        from differences of the exact gradient) polish it to machine precision; a coordinate stays
        at the bound 0 where the criterion rises from it."""
        from scipy.optimize import minimize

        idx = np.flatnonzero(active)
        self._active = active

        def full(x: np.ndarray) -> np.ndarray:
            gamma = np.zeros(self.n_components, dtype=np.result_type(x, np.float64))
            gamma[idx] = x
            return gamma

        def f(x: np.ndarray) -> float:
            value = float(np.real(self.criterion(full(x))))
            return value if math.isfinite(value) else math.inf

        def grad(x: np.ndarray) -> np.ndarray:
            return self.jacobian(lambda z: self.criterion(full(z)), x)

        if idx.size == 0:
            return np.zeros(self.n_components), True
        grid = [np.array(p) for p in product([0.0, 0.1, 1.0, 10.0], repeat=idx.size)]
        x = min(grid, key=f)
        res = minimize(lambda z: (f(z), grad(z)), x, jac=True, method="L-BFGS-B",
                       bounds=[(0.0, GAMMA_MAX)] * idx.size, options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500})
        x = np.clip(res.x, 0.0, GAMMA_MAX)
        g = grad(x)
        for _ in range(100):  # Newton on the free coordinates, with backtracking
            free = (x > 0) | (g < 0)
            if not free.any():
                break
            hess = _hessian_at(grad, x)[np.ix_(free, free)]
            val, vec = np.linalg.eigh(hess)
            if not np.all(np.isfinite(val)) or val.max() <= 0:
                break
            # Newton's step where the Hessian is positive; elsewhere its eigenvalues made positive
            # (|lambda|, floored) — a descent direction scaled like the criterion's curvature
            newton = bool(val.min() > 0)
            val = np.maximum(np.abs(val), 1e-8 * val.max())
            step = -(vec / val) @ (vec.T @ g[free])
            # near the optimum the criterion is flat to its rounding (1e-13 of it can hide a gradient
            # of 1e-7), so a step is taken when it lowers the criterion or the gradient; the search
            # stops when neither falls
            f0, g0, t = f(x), np.max(np.abs(g[free])), 1.0
            while t > 1e-12:
                x_new = x.copy()
                x_new[free] = np.clip(x[free] + t * step, 0.0, GAMMA_MAX)
                g_new = grad(x_new)
                f_new = f(x_new)
                if f_new < f0 or (f_new <= f0 + 1e-12 * max(1.0, abs(f0)) and np.max(np.abs(g_new[free])) < g0):
                    break
                t /= 2
            else:
                break
            x, g = x_new, g_new
            if newton and t == 1.0 and np.max(np.abs(g_new[free])) >= g0:  # at the optimum to rounding
                break
        g = grad(x)
        scale = max(1.0, abs(f(x)))
        converged = bool(np.all(np.where(x > 0, np.abs(g) * np.maximum(x, 1.0), np.maximum(-g, 0.0)) <= 1e-6 * scale))
        converged &= bool(np.all(x < GAMMA_MAX))
        return full(x), converged

    def estimates(self, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(beta, Cov(beta) = s2 (X' V^-1 X)^-1, s2) at ``gamma``, s2 = rss / (n - p)."""
        rss, _, e, mu = self.parts(gamma)
        beta = self.d @ mu
        beta[0] += self.shift
        scale = float(rss / (self.n - self.p))
        return beta, scale * (self.d @ np.linalg.inv(e) @ self.d.T), scale

    def variance_of_variances(self, gamma: np.ndarray, active: np.ndarray, s2: float) -> tuple:
        """(dCov(beta)/d varpar (p x p x k), A = 2 H^+ (k x k), a note on the Hessian or "") at the
        optimum, varpar = (theta of the active terms, sigma): lmerTest's ``Jac_list`` and
        ``vcov_varpar``."""
        self._active = active
        varpar = np.r_[np.sqrt(gamma[active]), math.sqrt(s2)]
        val, vec = np.linalg.eigh(self.hessian(self.deviance, varpar))
        note = ""
        if (val < -HESSIAN_TOL).any():
            note = "the REML deviance's Hessian has negative eigenvalues (not at a minimum); df may be off."
        elif (np.abs(val) <= HESSIAN_TOL).any():
            note = ("the REML deviance's Hessian is singular (variance parameters not all identifiable); df from "
                    "its pseudo-inverse, as lmerTest.")
        pos = val > HESSIAN_TOL
        return self.jacobian(self.covbeta, varpar), 2 * (vec[:, pos] / val[pos]) @ vec[:, pos].T, note

    def fit(self, active: np.ndarray, names: tuple[str, ...], label: str) -> Fitted:
        """Maximise, estimate and prepare Satterthwaite's df; warnings (prefixed with ``label``)
        for a singular Hessian, components at the boundary 0 and non-convergence. Raises
        ValueError / LinAlgError when the fit breaks down (non-finite estimates)."""
        from ..engine.pool import single_threaded_blas

        # thousands of products of small matrices: BLAS threads only contend (measured 100x slower
        # on 2 busy cores)
        with single_threaded_blas():
            gamma, converged = self.maximise(active)
            coef, cov, s2 = self.estimates(gamma)
            if not (np.isfinite(coef).all() and np.isfinite(np.diag(cov)).all() and s2 > 0):
                raise ValueError("non-finite estimates")
            jac, avar, hessian_note = self.variance_of_variances(gamma, active, s2)
        warn = [f"{label}: {hessian_note}"] if hessian_note else []
        for k, name in enumerate(names):
            if active[k] and gamma[k] == 0.0:
                warn.append(f"{label}: ({name}) variance estimated at 0 (boundary, a singular fit as lme4 reports "
                            "it); the other estimates are those of the model without it.")
        if not converged:
            warn.append(f"the {label} did not converge: read its numbers with care.")
        return Fitted(gamma, coef, cov, s2, jac, avar, converged, warn)


def _hessian_at(grad, x: np.ndarray) -> np.ndarray:
    """Central differences of the exact gradient (for the Newton steps: a few digits suffice)."""
    out = np.empty((x.size, x.size))
    for j in range(x.size):
        h = 1e-5 * max(x[j], 1e-3)
        e = np.zeros(x.size)
        e[j] = h
        out[:, j] = (grad(x + e) - grad(x - e)) / (2 * h)
    return (out + out.T) / 2
