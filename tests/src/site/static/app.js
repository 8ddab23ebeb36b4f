// Renders the product list from the JSON API. The cache-busting query gives every load a new URL, as on many
// real sites, so replay cannot match this request by its exact URL.
(async () => {
  const list = document.getElementById('products');
  try {
    const response = await fetch('/api/products?_=' + Date.now());
    const products = await response.json();
    list.replaceChildren(...products.map((product) => {
      const item = document.createElement('li');
      item.dataset.product = product.id;
      item.textContent = `${product.name}: $${product.price.toFixed(2)}`;
      return item;
    }));
    console.info(`loaded ${products.length} products`);
  } catch (error) {
    list.textContent = 'Could not load the products.';
  }
})();
