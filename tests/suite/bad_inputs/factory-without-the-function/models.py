def make():
    return 'model'
