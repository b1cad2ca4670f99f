"""Seed 002 of the transcript-scoring article: what was said (the four meaning-bearing
tokens the article names marked) and its transcripts A and B."""

SAID = (
    "[[Priya]] said the [[Helios]] migration slips to [[Q3]] and we should [[not]] sign the "
    "vendor contract before the security review"
)
# Transcript A: "lost the article 'the' twice".
A = (
    "Priya said Helios migration slips to Q3 and we should not sign the vendor contract "
    "before security review"
)
# Transcript B: "moved a deadline by a quarter and deleted 'not' from a commitment".
B = (
    "Priya said the Helios migration slips to Q2 and we should sign the vendor contract "
    "before the security review"
)
