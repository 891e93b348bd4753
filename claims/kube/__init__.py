"""The portal's only code that talks to Kubernetes (no Django imports here)."""
