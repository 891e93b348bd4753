"""Pure decisions, no writes: who may decide (rules), team quotas, what users type
(validation), whether a claim can be met (feasibility), the device picker, size limits,
the CUDA samples' verdicts.
"""
