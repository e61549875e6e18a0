"""What builds the image and the model package: Dockerfiles, buildspecs (run with fakes), the
container lock, the llama.cpp bindings proof, environment.yml."""
