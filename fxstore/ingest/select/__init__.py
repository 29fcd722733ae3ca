"""Which instrument's records become bars: traded activity per day, the front month."""
