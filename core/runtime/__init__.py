"""What one target forward needs, model-agnostic: draft trees and their attention masks, the paged KV
cache, forwards over segments of new tokens, the LM head applied only where logits are needed, exact
CPU kernels, and the acceptance rules. No drafter, no request, no timing policy lives here."""
