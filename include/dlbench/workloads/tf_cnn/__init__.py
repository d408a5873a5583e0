"""TensorFlow image-classification training (InceptionV3, ResNet-50, AlexNet)."""
