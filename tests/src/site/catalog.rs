//! The shop's fixed product list, as JSON (`/api/products`), as search results (`/search?q=`), and a page
//! per product (`/item/<id>`) with a form that adds it to the cart.

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::html::{escape, respond};

/// A product for sale. Prices are in cents so that no arithmetic is done in floating point.
pub(super) struct Product {
    pub id: &'static str,
    pub name: &'static str,
    pub price_cents: u32,
    /// Under `/static/`.
    pub image: &'static str,
}

pub(super) const PRODUCTS: [Product; 3] = [
    Product { id: "blue-mug", name: "Blue Mug", price_cents: 1250, image: "/static/blue-mug.png" },
    Product { id: "red-mug", name: "Red Mug", price_cents: 1250, image: "/static/red-mug.png" },
    Product { id: "teapot", name: "Teapot", price_cents: 2900, image: "/static/teapot.png" },
];

pub(super) fn find(id: &str) -> Option<&'static Product> {
    PRODUCTS.iter().find(|product| product.id == id)
}

/// `$12.50`.
pub(super) fn format_price(cents: u64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

/// The products whose name contains `query`, ignoring case and surrounding spaces; all of them for an
/// empty query.
fn matching(query: &str) -> Vec<&'static Product> {
    let query = query.trim().to_lowercase();
    PRODUCTS.iter().filter(|product| product.name.to_lowercase().contains(&query)).collect()
}

/// A product as the JSON API shows it: `{"id": "blue-mug", "name": "Blue Mug", "price": 12.5}`.
#[derive(Serialize)]
pub(super) struct ProductJson {
    id: &'static str,
    name: &'static str,
    price: f64,
}

/// `GET /api/products`: every product. The query (a cache-buster from `app.js`) is ignored.
pub(super) async fn products() -> Json<Vec<ProductJson>> {
    Json(
        PRODUCTS
            .iter()
            .map(|product| ProductJson {
                id: product.id,
                name: product.name,
                price: f64::from(product.price_cents) / 100.0,
            })
            .collect(),
    )
}

#[derive(Deserialize)]
pub(super) struct SearchQuery {
    #[serde(default)]
    q: String,
}

/// The search form, filled with `query`. The home page shows it too.
pub(super) fn search_form(query: &str) -> String {
    format!(
        r#"<form id="search-form" action="/search" method="get" role="search">
<label for="search-input">Search products</label>
<input id="search-input" name="q" type="search" value="{}" placeholder="mug">
<button id="search-submit" type="submit">Search</button>
</form>"#,
        escape(query)
    )
}

/// One product as a list item, with its picture, name and price.
pub(super) fn product_item(product: &Product) -> String {
    format!(
        r#"<li data-product="{id}"><figure><img src="{image}" alt="" width="96" height="96">
<figcaption><a href="/item/{id}">{name}</a>: {price}</figcaption></figure></li>
"#,
        id = product.id,
        image = product.image,
        name = escape(product.name),
        price = format_price(product.price_cents.into()),
    )
}

/// `GET /search?q=`: the products whose name contains `q`, ignoring case.
pub(super) async fn search(Query(SearchQuery { q }): Query<SearchQuery>) -> Response {
    let results = matching(&q);
    let summary = match results.len() {
        0 => format!("No products match “{}”.", escape(&q)),
        1 => format!("1 product matches “{}”.", escape(&q)),
        count => format!("{count} products match “{}”.", escape(&q)),
    };
    let items: String = results.iter().map(|product| product_item(product)).collect();
    let body = format!(
        r#"<h1>Search</h1>
{form}
<p id="result-count">{summary}</p>
<ul id="results" class="products">
{items}</ul>"#,
        form = search_form(&q),
    );
    respond(StatusCode::OK, Some(&format!("Search: {q}")), &[], &body)
}

/// `GET /item/<id>`: one product, its price, and a form that adds a quantity of it to the cart (which asks
/// to sign in first). Every product's page has the same layout: only the text and the form's values differ.
pub(super) async fn item(Path(id): Path<String>) -> Response {
    let Some(product) = find(&id) else { return super::html::not_found().await };
    let body = format!(
        r#"<h1 id="product-name">{name}</h1>
<figure><img id="product-image" src="{image}" alt="" width="192" height="192"></figure>
<p id="product-price">{price}</p>
<form id="item-form" method="post" action="/cart">
<input type="hidden" name="product" value="{id}">
<p><label for="item-qty">Quantity</label>
<input id="item-qty" name="qty" type="number" min="1" max="{max}" value="1"></p>
<p><button id="item-add" type="submit">Add to cart</button></p>
</form>
<p><a id="item-back" href="/search?q=">All products</a></p>"#,
        id = product.id,
        name = escape(product.name),
        image = product.image,
        price = format_price(product.price_cents.into()),
        max = super::account::MAX_QUANTITY,
    );
    respond(StatusCode::OK, Some(product.name), &[], &body)
}
