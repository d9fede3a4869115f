"""Step 2: assisted decoding records the states a rollback needs, and each recurrent state has its own history."""
