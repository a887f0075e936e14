"""Pure measures on arrays: functions of tensors to numbers, with no run, store or model in sight.

- :mod:`robustkit.measures.rsa`: representational similarity analysis (RSA);
- :mod:`robustkit.measures.cka`: linear centred kernel alignment (CKA);
- :mod:`robustkit.measures.debiased_cka`: linear CKA with the unbiased HSIC estimator;
- :mod:`robustkit.measures.procrustes`: orthogonal Procrustes distance;
- :mod:`robustkit.measures.moments`: the additive sums these are computed from;
- :mod:`robustkit.measures.half_sampling`: intervals from a bootstrap over the token sample;
- :mod:`robustkit.measures.hessian`: top Hessian eigenvalue and trace from Hessian-vector products.

Analyses (:mod:`robustkit.analysis`) gather the arrays from runs and call these. Contract shared
by the similarity measures: a value that cannot be computed honestly (non-finite input, a side
with no variation) is NaN, never a number that reads as a result.
"""
