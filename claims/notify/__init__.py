"""What people are told: emails to owners and approvers, and team webhooks."""
