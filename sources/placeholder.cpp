// placeholder until the adapters land
