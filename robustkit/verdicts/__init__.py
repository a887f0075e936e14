"""Verdicts on the papers' claims: recipes, the claim spec and its decision rules, evidence, what would settle one."""
