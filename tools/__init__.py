"""PyTorch side of Yomiage: reference model, exporter, bundle builder (never used at run time)."""
