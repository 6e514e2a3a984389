"""The ways of judging: statistical (sampled, two-sample, multi-draft and tree), exact, the
stream's modes, batch invariance and branch rates."""
