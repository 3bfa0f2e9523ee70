"""Idiom oracle: generated attention modules whose truth is learned by running them.

``generator.generate(seed)`` writes one small attention module as source text, choosing one
spelling per idiom axis (scores op, head split/merge, head-dim and scale source, scale
placement, softmax form, causal-mask construction / consumer / fill, dropout form, code shape)
and, for about half the seeds, injecting one fault that maps to a lint rule code.
``oracle.verify(variant)`` executes the module in float64 (float16 for overflowing fills, two
eval forwards for dropout) against ``F.scaled_dot_product_attention`` and confirms or refutes
the label; ``oracle.lint_codes(variant)`` lints the text through the public API;
``check_oracle.run(variant)`` runs the dynamic checks (``attncheck.check``) on the module with
the hints its user would give, and ``check_oracle.FAULT_CHECKS`` says which checks name each
fault.
"""
