print("keybound: not yet built")
