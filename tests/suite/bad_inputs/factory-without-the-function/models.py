def make():
    return "model"
