"""Human rating: clinicians' ratings and their agreement, a study served to a team, and who may open what."""
